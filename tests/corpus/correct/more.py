"""Correct twins of bug classes in bugs/bugs3.py: a looped row max padded with -inf, argmax with
torch's first-index tie rule, floor division and remainder of signed integers, mean cross entropy
over the non-ignored targets, and a causal row softmax that keeps the diagonal."""
import torch
import torch.nn.functional as F
import tritondiff  # noqa: F401
import triton
import triton.language as tl

from tritondiff import subject, tensor

FLOATS = ("float32", "float16", "bfloat16")
INTS = ("int32", "int64")


@triton.jit
def _rowmax_kernel(x_ptr, y_ptr, N, sm, sn, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.full((BLOCK,), -float("inf"), tl.float32)
    n_nan = tl.zeros((BLOCK,), tl.int32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        # padded lanes hold -inf, the identity of max, so an all-negative row is not topped by a 0
        x = tl.load(x_ptr + row * sm + cols * sn, mask=cols < N, other=-float("inf")).to(tl.float32)
        n_nan += (x != x).to(tl.int32)
        acc = tl.maximum(acc, tl.where(x != x, -float("inf"), x))
    # torch.amax propagates NaN; hardware max drops it, so count NaNs and apply the rule explicitly
    m = tl.where(tl.sum(n_nan, 0) > 0, float("nan"), tl.max(acc, 0))
    tl.store(y_ptr + row, m.to(y_ptr.dtype.element_ty))


@subject(reference=lambda x: x.amax(-1), inputs={"x": tensor(("M", "N"), dtypes=FLOATS)},
         dims={"M": (0, 64), "N": (1, 4096)})
def row_max_neg_inf_padding(x):
    M, N = x.shape
    y = torch.empty(M, dtype=x.dtype, device=x.device)
    if M:
        _rowmax_kernel[(M,)](x, y, N, x.stride(0), x.stride(1), BLOCK=256)
    return y


@triton.jit
def _argmax_first_kernel(x_ptr, out_ptr, N, sm, sn, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * sm + cols * sn, mask=cols < N, other=-float("inf")).to(tl.float32)
    is_nan = (x != x) & (cols < N)
    nan_i = tl.min(tl.where(is_nan, cols, N), 0)            # torch.argmax: the first NaN is the max
    best = tl.max(tl.where(is_nan, -float("inf"), x), 0)
    # the first real index holding the max (a row of all -inf gives 0, as in torch); padded lanes never count
    idx = tl.min(tl.where((x == best) & (cols < N), cols, N), 0)
    tl.store(out_ptr + row, tl.where(nan_i < N, nan_i, idx).to(tl.int64))


@subject(reference=lambda x: torch.argmax(x, -1), inputs={"x": tensor(("M", "N"), dtypes=FLOATS)},
         dims={"M": (0, 64), "N": (1, 2048)})
def argmax_first_on_ties(x):
    M, N = x.shape
    out = torch.empty(M, dtype=torch.int64, device=x.device)
    if M:
        _argmax_first_kernel[(M,)](x, out, N, x.stride(0), x.stride(1), BLOCK=triton.next_power_of_2(N))
    return out


@triton.jit
def _floor_divmod_kernel(a_ptr, b_ptr, q_ptr, r_ptr, n, sa, sb, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs * sa, mask=mask, other=0)
    b = tl.load(b_ptr + offs * sb, mask=mask, other=1)
    q = a // b                                   # truncates toward zero (C semantics)
    r = a % b                                    # takes the sign of a
    # floor semantics: a non-zero remainder whose sign differs from b's means the quotient was rounded up
    fix = (r != 0) & ((r < 0) != (b < 0))
    tl.store(q_ptr + offs, tl.where(fix, q - 1, q), mask=mask)
    tl.store(r_ptr + offs, tl.where(fix, r + b, r), mask=mask)


@subject(reference=lambda a, b: (torch.div(a, b, rounding_mode="floor"), torch.remainder(a, b)),
         inputs={"a": tensor(("N",), dtypes=INTS, low=-1000, high=1000),
                 "b": tensor(("N",), dtype_like="a", low=1, high=100)},
         dims={"N": (0, 10_000)})
def floor_divmod_int(a, b):
    n = a.numel()
    q = torch.empty(n, dtype=a.dtype, device=a.device)
    r = torch.empty(n, dtype=a.dtype, device=a.device)
    if n:
        _floor_divmod_kernel[(triton.cdiv(n, 1024),)](a, b, q, r, n, a.stride(0), b.stride(0), BLOCK=1024)
    return q, r


IGNORE = -1


@triton.jit
def _ce_mean_kernel(logits_ptr, labels_ptr, loss_ptr, V, s_row, s_col, s_label, ignore_index, n_valid,
                    BLOCK: tl.constexpr):
    row = tl.program_id(0)
    label = tl.load(labels_ptr + row * s_label)
    base = logits_ptr + row * s_row
    m = -float("inf")
    s = 0.0
    for off in range(0, V, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(base + cols * s_col, mask=cols < V, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, 0))
        shift = tl.where(m_new == -float("inf"), 0.0, m_new)
        s = s * tl.exp(m - shift) + tl.sum(tl.exp(x - shift), 0)
        m = m_new
    ignored = label == ignore_index
    x_label = tl.load(base + tl.where(ignored, 0, label) * s_col).to(tl.float32)
    loss = tl.where(ignored, 0.0, m + tl.log(s) - x_label)
    # the mean is over the targets that count; n_valid == 0 gives 0 / 0 = NaN, as torch does
    tl.store(loss_ptr + row, loss / n_valid)


@subject(reference=lambda logits, labels: F.cross_entropy(logits, labels, ignore_index=IGNORE),
         inputs={"logits": tensor(("M", "V"), dtypes=FLOATS),
                 "labels": tensor(("M",), dtypes=("int64",), low=-1, high="V")},
         dims={"M": (1, 64), "V": (2, 4096)})
def cross_entropy_mean_ignore_index(logits, labels):
    M, V = logits.shape
    n_valid = int((labels != IGNORE).sum())      # a host sync, as fused cross-entropy wrappers do
    loss = torch.empty(M, dtype=torch.float32, device=logits.device)
    _ce_mean_kernel[(M,)](logits, labels, loss, V, logits.stride(0), logits.stride(1), labels.stride(0), IGNORE,
                          float(n_valid), BLOCK=min(1024, triton.next_power_of_2(V)))
    return loss.sum().to(logits.dtype)


@triton.jit
def _causal_softmax_kernel(x_ptr, y_ptr, N, sm, sn, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    keep = (cols < N) & (cols <= row)            # query `row` sees keys 0..row, itself included
    x = tl.load(x_ptr + row * sm + cols * sn, mask=cols < N, other=0.0).to(tl.float32)
    x = tl.where(keep, x, -float("inf"))
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + row * N + cols, (e / tl.sum(e, 0)).to(y_ptr.dtype.element_ty), mask=cols < N)


def _causal_ref(x):
    M, N = x.shape
    future = torch.ones((M, N), dtype=torch.bool, device=x.device).triu(1)
    return torch.softmax(x.masked_fill(future, float("-inf")), -1)


@subject(reference=_causal_ref, inputs={"x": tensor(("M", "N"), dtypes=FLOATS)},
         dims={"M": (0, 64), "N": (1, 1024)})
def causal_softmax_rows(x):
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M:
        _causal_softmax_kernel[(M,)](x, y, N, x.stride(0), x.stride(1), BLOCK=triton.next_power_of_2(N))
    return y
