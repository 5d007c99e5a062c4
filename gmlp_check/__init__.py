"""gmlp-check: differential checking of fused grouped MLPs against the main_grad contract."""
