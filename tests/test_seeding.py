"""The suite's per-test seed (conftest._torch_seed_per_test): an unseeded draw repeats from run to run."""
import zlib

import torch


def test_a_test_draws_from_the_seed_of_its_own_node_id(request):
    got = torch.randn(4)
    torch.manual_seed(zlib.crc32(request.node.nodeid.encode()))
    assert torch.equal(got, torch.randn(4))


def test_two_tests_draw_different_values(request):
    torch.manual_seed(zlib.crc32(b"tests/test_seeding.py::test_a_test_draws_from_the_seed_of_its_own_node_id"))
    other = torch.randn(4)
    torch.manual_seed(zlib.crc32(request.node.nodeid.encode()))
    assert not torch.equal(other, torch.randn(4))
