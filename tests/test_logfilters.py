"""What Daphne's log says about a request whose client left mid-request (dashboard/settings.py
LOGGING, tasksapp/logfilters.py). The error is asgiref's own, raised by a CurrentThreadExecutor
that has quit, logged the way Daphne logs an application that failed."""

import logging
import threading
from concurrent.futures import Future

import pytest
from asgiref.current_thread_executor import CurrentThreadExecutor


def executor_quit_error() -> RuntimeError:
    """What asgiref raises when work is handed to a request's thread after it was handed back."""
    executor = CurrentThreadExecutor(None)
    done: Future[None] = Future()
    done.set_result(None)
    executor.run_until_future(done)  # the request's sync part is over: the executor quits
    raised: list[RuntimeError] = []

    def submit() -> None:
        try:
            executor.submit(print)
        except RuntimeError as exc:
            raised.append(exc)

    thread = threading.Thread(target=submit)
    thread.start()
    thread.join()
    [error] = raised
    return error


def daphne_logs(exc: BaseException) -> None:
    logging.getLogger("daphne.server").error("Exception inside application: %s", exc, exc_info=exc)


def test_a_client_that_left_mid_request_is_one_info_line(caplog: pytest.LogCaptureFixture) -> None:
    """Fails without the filter: ERROR "Exception inside application" with asgiref's traceback."""
    caplog.set_level(logging.INFO, logger="daphne.server")
    daphne_logs(executor_quit_error())
    [record] = caplog.records
    assert (record.levelname, record.exc_info) == ("INFO", None)
    assert record.getMessage() == (
        "a request ended after its client had left (asgiref: CurrentThreadExecutor already quit or is "
        "broken); request_finished was not sent"
    )


def test_another_runtime_error_keeps_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="daphne.server")
    daphne_logs(RuntimeError("CurrentThreadExecutor already quit or is broken, and something else"))
    [record] = caplog.records
    assert record.levelname == "ERROR" and record.exc_info is not None
