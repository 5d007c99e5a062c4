"""The activations' names, declared without torch: command-line options and the pytest plugin
offer them before anything imports torch (the plugin is loaded by every pytest run where
gmlp-check is installed). ``refimpl.activations`` gives each name its function, in this order."""

ACTIVATION_NAMES: tuple[str, ...] = (
    "swiglu",
    "scaled_swiglu",
    "clamped_qgeglu",
    "geglu",
    "gelu",
    "relu",
    "srelu",
)
