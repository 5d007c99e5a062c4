"""A backend module whose import fails (for the registry's error message)."""

import a_module_that_does_not_exist  # noqa: F401
