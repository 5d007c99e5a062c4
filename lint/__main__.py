"""``python -m lint`` runs gmlp-lint."""

from .cli import main

main()
