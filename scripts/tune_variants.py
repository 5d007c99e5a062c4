"""The tile variants scripts/tune_kernels.py checks and times, per kernel and per shape.

A label spells its tiles: P (pointer loads) or T (TMA descriptors), BLOCK_M x BLOCK_N x BLOCK_K,
w warps, s stages; then d start_from_dest, r max_registers, g group size where set.
"""

from __future__ import annotations

from gmlp_check.fused.tiles import Tiles

T = Tiles
# (label, tiles); "old" is the saved package's launcher at its own tiles (needs --old).
ROW_VARIANTS = [
    ("old", None),
    ("P128x128x64w8s3", T(128, 128, 64, 8, 3)),
    ("T128x128x64w8s3", T(128, 128, 64, 8, 3, tma=True)),
    ("T128x128x64w8s4", T(128, 128, 64, 8, 4, tma=True)),
    ("T128x256x64w8s3", T(128, 256, 64, 8, 3, tma=True)),
    ("T128x256x64w8s4", T(128, 256, 64, 8, 4, tma=True)),
    ("T256x128x64w8s3", T(256, 128, 64, 8, 3, tma=True)),
    ("T128x128x64w4s4", T(128, 128, 64, 4, 4, tma=True)),
    ("T128x256x64w8s3g16", T(128, 256, 64, 8, 3, group=16, tma=True)),
]
FC1_VARIANTS = [
    ("old", None),
    ("P128x64x64w8s3", T(128, 64, 64, 8, 3)),
    ("T128x64x64w8s3", T(128, 64, 64, 8, 3, tma=True)),
    ("T128x64x64w8s4", T(128, 64, 64, 8, 4, tma=True)),
    ("T128x128x64w8s3", T(128, 128, 64, 8, 3, tma=True)),
    ("T128x128x64w8s4", T(128, 128, 64, 8, 4, tma=True)),
    ("T256x64x64w8s3", T(256, 64, 64, 8, 3, tma=True)),
]
DGRAD_ACT_VARIANTS = [
    ("old", None),
    ("T128x64x64w8s3", T(128, 64, 64, 8, 3, tma=True)),
    ("T128x64x64w8s4", T(128, 64, 64, 8, 4, tma=True)),
    ("T128x64x64w8s3r128", T(128, 64, 64, 8, 3, tma=True, max_registers=128)),
    ("T128x128x64w8s3", T(128, 128, 64, 8, 3, tma=True)),
    ("T128x128x64w8s4", T(128, 128, 64, 8, 4, tma=True)),
    ("T256x64x64w8s3", T(256, 64, 64, 8, 3, tma=True)),
]
# Weight gradient: block_m is BLOCK_T (rows per reduction step), block_n x block_k the tile.
WGRAD_VARIANTS = [
    ("old", None),
    ("P64x128x128w8s3", T(64, 128, 128, 8, 3)),
    ("T64x128x128w8s3", T(64, 128, 128, 8, 3, tma=True)),
    ("T64x128x128w8s3d", T(64, 128, 128, 8, 3, tma=True, start_from_dest=True)),
    (
        "T64x128x128w8s3dr128",
        T(64, 128, 128, 8, 3, tma=True, start_from_dest=True, max_registers=128),
    ),
    ("T64x128x128w8s4d", T(64, 128, 128, 8, 4, tma=True, start_from_dest=True)),
    ("T64x128x256w8s3d", T(64, 128, 256, 8, 3, tma=True, start_from_dest=True)),
    ("T64x256x128w8s3d", T(64, 256, 128, 8, 3, tma=True, start_from_dest=True)),
    ("T128x128x128w8s2d", T(128, 128, 128, 8, 2, tma=True, start_from_dest=True)),
    (
        "T64x128x128w8s3dr128g4",
        T(64, 128, 128, 8, 3, group=4, tma=True, start_from_dest=True, max_registers=128),
    ),
]
# Variants per shape beyond qwen3 (which runs all): the candidates that fit its sizes.
SHAPE_VARIANTS = {
    "mixtral": {
        "old",
        "T128x128x64w8s3",
        "T128x128x64w8s4",
        "T128x256x64w8s3",
        "T128x256x64w8s4",
        "T128x256x64w8s3g16",
        "T128x64x64w8s4",
        "T128x64x64w8s3r128",
        "T64x128x128w8s3d",
        "T64x128x128w8s3dr128",
        "T64x128x256w8s3d",
        "T64x256x128w8s3d",
        "T128x128x128w8s2d",
        "T64x128x128w8s3",
        "T64x128x128w8s3r128",
    },
    "deepseek": {
        "old",
        "T128x128x64w8s3",
        "T128x256x64w8s3",
        "T128x128x64w8s4",
        "T128x64x64w8s4",
        "T128x64x64w8s3r128",
        "T64x128x128w8s3d",
        "T64x128x128w8s3dr128",
        "T64x128x256w8s3d",
        "T64x128x128w8s3r128",
    },
}
KERNELS = {
    "fc1_forward": FC1_VARIANTS,
    "fc2_forward": ROW_VARIANTS,
    "fc2_dgrad": DGRAD_ACT_VARIANTS,
    "fc1_dgrad": ROW_VARIANTS,
    "wgrad_fc2": WGRAD_VARIANTS,
    "wgrad_fc1": WGRAD_VARIANTS,
    "wgrad_fc1_overwrite": [v for v in WGRAD_VARIANTS if not v[1] or not v[1].start_from_dest]
    + [("T64x128x128w8s3r128", T(64, 128, 128, 8, 3, tma=True, max_registers=128))],
}
