"""Which weight a bookkeeping block belongs to: the one its guard and its reads name.

A block that marks ``X.grad_added_to_main_grad = True`` is written for one weight: its
``hasattr(W, "grad_added_to_main_grad")`` guard, the dummy it shapes from ``W.main_grad``
and the ``zero_out_wgrad`` it asks all name that weight. When every one of those reads names
one weight W and none names X, the odd one out is the mark itself (a copy-pasted
``weight_down.grad_added_to_main_grad = True`` in ``weight_up``'s block), not the reads: W's
main_grad was written and W gets a dummy, but W is never marked, so the DDP hook adds the
dummy into W's main_grad. When the block reads X too, a single read of another weight is
the odd one (Transformer Engine #548) and the reads are what to change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import libcst as cst

from . import wgrad

# A block whose reads name one weight only once is too thin to say whose it is.
MIN_READS = 2


def owner_of_block(
    reads: Iterable[tuple[str, cst.BaseExpression]],
    marked: set[str],
    same: Callable[[cst.BaseExpression], bool] = lambda owner: False,
) -> cst.BaseExpression | None:
    """W when at least ``MIN_READS`` per-parameter reads (``(what, owner)`` pairs) all name
    one weight W, none names a marked weight (by stem, or by ``same``: another name of a
    marked weight), so the block is W's and its mark on another weight is misplaced; None
    otherwise."""
    owners = [owner for _, owner in reads]
    words = {wgrad.stem(owner) for owner in owners}
    if len(owners) < MIN_READS or len(words) != 1 or None in words or words & marked:
        return None
    if any(same(owner) for owner in owners):
        return None
    return owners[0]
