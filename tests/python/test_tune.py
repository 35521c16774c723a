"""rlgemm.tune: a model's nn.Linear shapes and the tuner behind them.

Runs under pytest, or without it (ctest: python3 -m unittest tests/python/test_tune.py, with PYTHONPATH=python
and RLGEMM_CLI set to the built rlgemm); the tests that need PyTorch skip where it is not installed.
"""
import os
import subprocess
import tempfile
import unittest

import rlgemm
from rlgemm import tune

try:
    import torch
except ImportError:
    torch = None


class TuneShapes(unittest.TestCase):
    def test_synthetic_tuning_returns_one_row_per_shape(self):
        with tempfile.TemporaryDirectory() as tmp:
            rows = rlgemm.tune_shapes([(64, 128, 256), (1, 4096, 4096)], budget=2, db=os.path.join(tmp, "t.db"),
                                      backend="synthetic", extra_args=["--in-process"])
            self.assertEqual([(r["m"], r["n"], r["k"]) for r in rows], [(64, 128, 256), (1, 4096, 4096)])
            for r in rows:
                self.assertEqual(r["evaluations"], 2)
                self.assertGreater(r["speedup"], 0)
                self.assertIn("/", r["design"])
            self.assertTrue(os.path.exists(os.path.join(tmp, "t.db")))

    def test_bf16_shapes_are_tuned_with_bf16_designs(self):
        with tempfile.TemporaryDirectory() as tmp:
            rows = rlgemm.tune_shapes([(64, 128, 256)], budget=2, db=os.path.join(tmp, "t.db"), backend="synthetic",
                                      extra_args=["--in-process"], dtype="bf16")
            self.assertEqual(len(rows), 1)
            self.assertTrue(rows[0]["design"].endswith("/bf16"), rows[0]["design"])
            with self.assertRaises(subprocess.CalledProcessError) as caught:
                rlgemm.tune_shapes([(64, 128, 256)], budget=1, db=os.path.join(tmp, "t.db"), backend="synthetic",
                                   dtype="fp8")
            self.assertEqual(caught.exception.returncode, 2)
            self.assertIn("supported are fp16, bf16", caught.exception.stderr)

    def test_a_rule_breaking_shape_fails_with_the_tuners_message(self):
        with tempfile.TemporaryDirectory() as tmp:
            with self.assertRaises(subprocess.CalledProcessError) as caught:
                rlgemm.tune_shapes([(64, 60, 64)], budget=1, db=os.path.join(tmp, "t.db"), backend="synthetic")
            self.assertEqual(caught.exception.returncode, 2)
            self.assertIn("multiple of 8", caught.exception.stderr)
        with self.assertRaises(ValueError):
            rlgemm.tune_shapes([], backend="synthetic")

    def test_the_cli_is_found_through_the_environment(self):
        saved = os.environ.get("RLGEMM_CLI")
        try:
            os.environ["RLGEMM_CLI"] = "/some/where/rlgemm"
            self.assertEqual(tune.find_cli(), "/some/where/rlgemm")
        finally:
            if saved is None:
                del os.environ["RLGEMM_CLI"]
            else:
                os.environ["RLGEMM_CLI"] = saved


@unittest.skipIf(torch is None, "needs PyTorch")
class LinearShapes(unittest.TestCase):
    def model(self):
        return torch.nn.Sequential(torch.nn.Linear(4096, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 50))

    def test_read_off_the_modules_with_sizes_padded_to_multiples_of_8(self):
        shapes = rlgemm.linear_shapes(self.model(), batch_sizes=(1, 8))
        self.assertEqual(shapes, [(1, 1024, 4096), (1, 56, 1024), (8, 1024, 4096), (8, 56, 1024)])

    def test_forward_hooks_record_the_rows_each_layer_sees(self):
        model = self.model()
        shapes = rlgemm.linear_shapes(model, batch_sizes=(3,), forward=lambda t: model(torch.zeros(2, t, 4096)))
        self.assertEqual(shapes, [(6, 1024, 4096), (6, 56, 1024)])
        self.assertEqual(len(model[0]._forward_hooks), 0)  # the hooks are removed again

    def test_bad_batch_sizes_and_models_without_linears(self):
        with self.assertRaises(ValueError):
            rlgemm.linear_shapes(self.model(), batch_sizes=(0,))
        with self.assertRaises(ValueError):
            rlgemm.linear_shapes(torch.nn.ReLU(), batch_sizes=(1,))

    def test_tune_model_tunes_the_recorded_shapes(self):
        with tempfile.TemporaryDirectory() as tmp:
            rows = rlgemm.tune_model(self.model(), batch_sizes=(16,), budget=1, db=os.path.join(tmp, "t.db"),
                                     backend="synthetic", extra_args=["--in-process"])
            self.assertEqual([(r["m"], r["n"], r["k"]) for r in rows], [(16, 1024, 4096), (16, 56, 1024)])


if __name__ == "__main__":
    unittest.main()
