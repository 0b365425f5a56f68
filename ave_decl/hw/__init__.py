"""The hardware vocabulary shared by the verifier, the simulator and the backends.

Owns: integer index expressions (`expr`, the hash-consed DAG that layouts and addresses are
written in), layouts and swizzles (`layout`), matrix-instruction operand maps (`instructions`),
element types and their sizes (`dtypes`), the launch limits of each target (`targets`). Imports nothing else of ave_decl: it is the bottom layer.
"""
