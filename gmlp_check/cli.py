"""The gmlp-check command line (placeholder until the differential checker lands)."""

import sys

import click


@click.group()
def main() -> None:
    """Check a fused grouped MLP against the main_grad contract."""


@main.command()
def diff() -> None:
    """Compare the reference grouped MLP with a fused backend (not implemented yet)."""
    click.echo("gmlp-check diff: not implemented yet")
    sys.exit(0)
