"""Forms built from servers' JSON schemas: the fields one schema property becomes (`fields`), what
a schema may hold before it is rendered (`check`), an elicitation's form (`elicitation`), a tool's
arguments form (`tools`), and the operator that fills them for the conformance client (`operator`).
"""
