"""harness.opinfo: PyTorch's OpInfo database without expecttest installed, its names, and the ops a
differential comparison leaves out."""
from tritondiff.harness import opinfo


def test_the_database_loads_and_names_variants():
    db = opinfo.load_op_db()
    names = {opinfo.op_name(info) for info in db}
    assert {"add", "softmax", "nn.functional.layer_norm"} <= names
    variant = next(info for info in db if info.variant_test_name)
    assert opinfo.op_name(variant) == f"{variant.name}.{variant.variant_test_name}"


def test_every_random_op_of_the_database_is_left_out():
    """A random op's eager output is no reference (randn was compared once, a false alarm per example)."""
    db_names = {info.name for info in opinfo.load_op_db()}
    random_looking = {n for n in db_names if n in ("bernoulli", "multinomial", "normal", "uniform", "log_normal")
                      or n.startswith("rand")}
    assert random_looking and random_looking <= opinfo.SKIP_RANDOM, random_looking - opinfo.SKIP_RANDOM
    assert {"empty", "empty_like"} <= opinfo.SKIP_UNINITIALIZED
