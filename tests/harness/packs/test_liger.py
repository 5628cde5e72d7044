"""harness.packs.liger: the references the liger pack judges against (liger-kernel installed)."""
import math

import pytest
import torch

pytest.importorskip("liger_kernel")

from tritondiff.harness.packs import liger  # noqa: E402


def test_jsd_of_disjoint_distributions_is_log_two_not_nan():
    """Two one-hot distributions on different classes (logits ~1e30 apart): the generalized JSD at beta = 0.5
    is ln 2.  Written out, 0 * (log 0 - log m) made the float64 truth NaN, and liger's right answer was
    reported as 'finite where NaN/inf expected' (an H200 fused_linear_jsd finding)."""
    big = torch.tensor([[1e30, 0.0, 0.0]], dtype=torch.float64)
    log_q, log_p = torch.log_softmax(big, -1), torch.log_softmax(big.roll(1, -1), -1)
    assert math.isclose(float(liger.jsd_reference(log_q, log_p, 0.5)), math.log(2), rel_tol=1e-12)
    assert float(liger.jsd_reference(log_q, log_p, 0.0)) >= 1e30          # KL(P || Q): the logits' gap
    same = torch.log_softmax(torch.randn(4, 7, dtype=torch.float64), -1)
    assert float(liger.jsd_reference(same, same, 0.5)) == 0.0
