"""An independent dense formulation of the grouped MLP, for checking the reference.

Instead of slicing tokens per expert it gathers each token's expert weights into a
[T, out, in] tensor and uses one batched product, so it shares no indexing code with refimpl.
"""

import torch

from gmlp_check.refimpl import ACTIVATIONS


def expert_of_each_token(split_sizes: list[int]) -> torch.Tensor:
    return torch.repeat_interleave(torch.arange(len(split_sizes)), torch.tensor(split_sizes))


def dense_grouped_mlp(x, split_sizes, w1, b1, w2, b2, activation: str, probs=None):
    """w1: [G, 2ffn|ffn, hidden], w2: [G, hidden, ffn]; b1/b2: [G, out] or None."""
    experts = expert_of_each_token(split_sizes).to(x.device)
    h = torch.einsum("toi,ti->to", w1[experts], x)
    if b1 is not None:
        h = h + b1[experts]
    act = ACTIVATIONS[activation]
    a = act.fn(h)
    if act.uses_probs:
        a = a * probs[:, None]
    y = torch.einsum("toi,ti->to", w2[experts], a)
    if b2 is not None:
        y = y + b2[experts]
    return y


def _stack(layer, kind: str):
    params = layer.weight_params() if kind == "weight" else layer.bias_params()
    if not params:
        return None
    if layer.single_grouped_weight:
        return params[0].detach().double().clone()
    return torch.stack([p.detach().double() for p in params])


def dense_gradients(mlp, x, split_sizes, dy, probs=None) -> dict[str, torch.Tensor]:
    """Output and every gradient of the dense formulation, in float64, keyed like refimpl's
    parameter names plus 'y', 'x' and 'probs'."""
    leaves = {
        f"{layer.name}.{kind}": t.requires_grad_()
        for layer in (mlp.fc1, mlp.fc2)
        for kind in ("weight", "bias")
        if (t := _stack(layer, kind)) is not None
    }
    xd = x.detach().double().requires_grad_()
    pd = probs.detach().double().requires_grad_() if probs is not None else None
    y = dense_grouped_mlp(
        xd,
        list(split_sizes),
        leaves["fc1.weight"],
        leaves.get("fc1.bias"),
        leaves["fc2.weight"],
        leaves.get("fc2.bias"),
        mlp.activation.name,
        pd,
    )
    y.backward(dy.double())
    out = {"y": y.detach(), "x": xd.grad}
    if pd is not None:
        out["probs"] = pd.grad
    for layer in (mlp.fc1, mlp.fc2):
        for kind in ("weight", "bias"):
            key = f"{layer.name}.{kind}"
            if key not in leaves:
                continue
            grad = leaves[key].grad
            if layer.single_grouped_weight:
                out[key] = grad
            else:
                for g in range(layer.num_groups):
                    out[f"{key}{g}"] = grad[g]
    return out
