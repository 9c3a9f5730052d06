"""The application layer: one function per verb, each taking the parsed command line.

cli.py parses and calls one of these; they wire the layers below (campaign runner, store, analysis,
report) and print the answer. Nothing below imports this package (docs/architecture.md). Kept empty: a
verb imports only its own module.
"""
