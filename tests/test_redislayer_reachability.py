"""What a process logs about Redis while it is away (tasksapp/redislayer.py Reachability): one
WARNING when it is first found unreachable, one every still_away_seconds while failures go on
(counting them), one INFO when it answers again (counting all), and nothing for failures of steps
begun before it came back. The drill with real processes is tests/faults/test_infra.py."""

import logging
import time

import pytest
import redis.exceptions

from tasksapp.redislayer import Reachability

REFUSED = redis.exceptions.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "tasksapp.redislayer"]


def test_an_outage_is_a_line_when_lost_one_per_period_while_it_lasts_and_one_when_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="tasksapp.redislayer")
    state = Reachability(still_away_seconds=0.3, settle_seconds=0.3)
    state.worked()  # nothing to say while Redis answers
    for _ in range(50):
        state.failed("socket(s) closed or refused", REFUSED)
    state.failed("notification(s) not sent", REFUSED)
    time.sleep(0.35)
    for _ in range(3):
        state.failed("notification(s) not sent", REFUSED)
    state.worked()
    state.worked()
    state.failed("socket(s) closed or refused", REFUSED)  # begun before Redis came back
    assert lines(caplog) == [
        (
            "WARNING",
            "live: Redis is unreachable (Error 111 connecting to 127.0.0.1:6379. Connection refused): "
            "live updates and nudges wait; open pages reconnect and catch up once it answers",
        ),
        (
            "WARNING",
            "live: Redis still unreachable after 0 s: 49 socket(s) closed or refused, 2 notification(s) "
            "not sent in the last 0 s",  # said by the first failure after the period
        ),
        (
            "INFO",
            "live: Redis answers again after 0 s; meanwhile 50 socket(s) closed or refused, "
            "4 notification(s) not sent",
        ),
    ]
    time.sleep(0.35)
    state.failed("socket(s) closed or refused", REFUSED)  # a new outage
    assert len(lines(caplog)) == 4 and lines(caplog)[-1][0] == "WARNING"
