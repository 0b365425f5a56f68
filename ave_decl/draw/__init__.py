"""Pictures of what the verifier computed: buffer layouts, instruction operand maps, a finding's
violating set (`ave draw`), and the static HTML audit report (`ave audit --html`).

Above `report/` (it draws the report model) and below `cli`: it may import `hw`, `lang`, `facts`
(a kernel's buffers and launch shape, from the lowering), `report` and `pipeline` (`ave draw
finding` checks its file). Every picture is SVG built with `xml.etree.ElementTree`, so every name,
message and source line written into it is escaped.
"""
