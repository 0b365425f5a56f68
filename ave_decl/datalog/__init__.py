"""Datalog: Soufflé-syntax rule programs, their linting, and the engines that run them."""
