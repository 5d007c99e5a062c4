"""Pytest plugin: run the differential suite against your own fused grouped MLP."""
