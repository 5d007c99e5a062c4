"""One module per rule, named after its code: its documentation, VALID / INVALID examples and
check (``registry.py`` lists them). The modules load without libcst; their checks import it."""
