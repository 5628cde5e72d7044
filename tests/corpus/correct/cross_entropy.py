"""Cross entropy over a large vocabulary: one program per row, the vocabulary in blocks with an
online log-sum-exp, label smoothing and ignore_index, per-row losses (reduction='none')."""
import torch
import torch.nn.functional as F
import tritondiff  # noqa: F401
import triton
import triton.language as tl

from tritondiff import subject, tensor

IGNORE = -1
SMOOTH = 0.1


@triton.jit
def _ce_kernel(logits_ptr, labels_ptr, loss_ptr, V, s_row, s_col, s_label, ignore_index, smoothing, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    label = tl.load(labels_ptr + row * s_label)
    base = logits_ptr + row * s_row
    m = -float("inf")
    s = 0.0
    total = 0.0
    for off in range(0, V, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < V
        x = tl.load(base + cols * s_col, mask=mask, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, 0))
        shift = tl.where(m_new == -float("inf"), 0.0, m_new)
        s = s * tl.exp(m - shift) + tl.sum(tl.exp(x - shift), 0)
        m = m_new
        total += tl.sum(tl.where(mask, x, 0.0), 0)
    lse = m + tl.log(s)
    safe = tl.where(label == ignore_index, 0, label)
    x_label = tl.load(base + safe * s_col).to(tl.float32)
    loss = (1.0 - smoothing) * (lse - x_label) + smoothing * (lse - total / V)
    loss = tl.where(label == ignore_index, 0.0, loss)
    tl.store(loss_ptr + row, loss.to(loss_ptr.dtype.element_ty))


def _ce_ref(logits, labels):
    return F.cross_entropy(logits, labels, ignore_index=IGNORE, label_smoothing=SMOOTH, reduction="none")


@subject(reference=_ce_ref,
         inputs={"logits": tensor(("M", "V"), dtypes=("float32", "float16", "bfloat16")),
                 "labels": tensor(("M",), dtypes=("int64",), low=-1, high="V")},
         dims={"M": (1, 64), "V": (2, 1_100_000)}, where=lambda M, V: M * V <= 2_200_000)
def cross_entropy_looped(logits, labels):
    M, V = logits.shape
    loss = torch.empty(M, dtype=logits.dtype, device=logits.device)
    _ce_kernel[(M,)](logits, labels, loss, V, logits.stride(0), logits.stride(1), labels.stride(0), IGNORE, SMOOTH,
                     BLOCK=min(8192, triton.next_power_of_2(V)))
    return loss
