"""What the rules are built on and share: the parsed file and its units, control flow,
reaching definitions and the value analyses, syntactic patterns, the branches GMLP001 and
GMLP002 judge, where a downgraded flag came from, and the collector that turns nodes into
findings. Everything here imports libcst; the rule modules load it only when they check."""
