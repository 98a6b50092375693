"""The driver's search holds no SciPy: the sweep's searcher and scheduler are built, points are
drawn past TPE's start-up trials and decoded (a normal space among them, whose quantile SciPy
used to compute) in a fresh interpreter, which then has imported neither SciPy nor scikit-learn."""

from __future__ import annotations

from tests.unit.test_import_footprint import _imported_after


def test_drawing_and_decoding_a_sweeps_points_imports_no_scipy(tmp_path):
    imported = _imported_after(
        """
        import math
        from ludwig_hpo.config import load_sweep
        import ludwig_hpo.driver.sweep
        from ludwig_hpo.config.spaces import parse_space
        from ludwig_hpo.search.algorithms import make_searcher
        from ludwig_hpo.search.schedulers import make_scheduler
        from ludwig_hpo.search.space import decode, decode_value, encode_value

        cfg = load_sweep("sweeps/breast_cancer.yaml").config
        hp = cfg.hyperopt
        make_scheduler(hp, cfg.trainer.epochs)
        searcher = make_searcher(hp, cfg.objectives)
        for i in range(hp.search_alg.n_startup_trials + 2):
            point = decode(hp.parameters, searcher.suggest(f"t{i}"))
            assert set(point) == set(hp.parameters), point
            searcher.on_trial_complete(f"t{i}", {searcher.metric: float(i)})
        normal = parse_space({"space": "randn", "mean": 1.0, "sd": 2.0})
        assert math.isclose(decode_value(normal, encode_value(normal, 2.5)), 2.5, rel_tol=1e-9)
        """
    )
    assert imported & {"scipy", "sklearn", "torch", "mlflow"} == set(), imported
