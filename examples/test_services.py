"""Tests of this folder's services with nbkit's test kit: ``python -m pytest test_services.py`` from here.

They run each service's own ``app`` in memory on a virtual clock (``nbkit_app`` is a fixture of nbkit's
pytest plugin; where nbkit is not installed, add ``-p nbkit.testing_plugin``). No file of this folder is
written: the file service runs on a temporary stream file, and saves its positions beside it.
"""

import first
import service

from nbkit.testing import TestApp


def test_a_flaky_order_is_paid_at_its_third_attempt(nbkit_app):
    test = nbkit_app(service.app)
    test.publish("orders", {"id": 1})
    test.publish("orders", {"id": 2, "flaky": True})
    test.run_until_idle()
    calls = test.handler(service.handle)
    assert [c.json()["id"] for c in calls.calls] == [1, 2]
    test.advance(2)  # the first copy is appended and delivered: attempt 2, still flaky
    test.advance(2)  # attempt 3: paid
    calls.assert_called_with({"id": 2, "flaky": True}, headers={"x-ruststream-retry-count": "2"})
    assert [c.attempt for c in calls.calls] == [1, 1, 2, 3]
    assert [copy.retry_count for copy in test.expect_published("orders", 2)] == [1, 2]
    assert test.dead_letters() == {}


def test_the_first_stage_passes_ready_jobs_on_and_retries_the_others_downstream():
    with TestApp(first.app) as test:  # without the fixture: a context manager
        test.publish("jobs", {"id": 1, "ready": True})
        test.publish("jobs", {"id": 2})
        test.publish("jobs", {"id": 3}, headers={"x-ruststream-retry-count": "1"})  # back from a stage after
        test.run_until_idle()
        assert [m.json() for m in test.published("jobs.done")] == [{"id": 1, "ready": True}]
        [copy] = test.expect_published("jobs.retry", 1)
        assert copy.json() == {"id": 2} and copy.retry_count == 1
        [dead] = test.expect_published("jobs.dead", 1)
        assert dead.json() == {"id": 3} and dead.retry_count == 2
