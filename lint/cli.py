"""The gmlp-lint command line (placeholder)."""

def main() -> None:
    print("gmlp-lint: not implemented yet")

