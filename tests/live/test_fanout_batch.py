"""Batched fan-out renders (tasksapp/live/fanout.py) and rooms (tasksapp/live/rooms.py): the rows
that the task-list sockets of one audience need in the same flush are rendered once each, together,
in one database step, the frame is built once, and every socket still gets every row."""

import re

import pytest
from asgiref.sync import sync_to_async
from django.db import transaction

from tasksapp import services
from tasksapp.metrics import live_counts
from tests.support.live import make_task, signed_in, socket

pytestmark = pytest.mark.django_db(transaction=True)


def change_together(tasks: list) -> None:  # type: ignore[type-arg]
    with transaction.atomic():  # three messages published back to back, at commit
        for task in tasks:
            services.task_record_error(task=task, error="batched")


async def test_rows_for_many_sockets_are_rendered_once_each_in_one_step() -> None:
    _, client = await sync_to_async(signed_in)()
    tasks = [await sync_to_async(make_task)() for _ in range(3)]
    sockets = [socket(client, "page=tasks") for _ in range(5)]
    for communicator in sockets:
        assert (await communicator.connect())[0]
    counted = ("batches", "batch_items", "batch_waits", "frames_built", "frames_sent")
    before = {key: live_counts[key] for key in counted}

    await sync_to_async(change_together)(tasks)
    for communicator in sockets:
        seen: set[int] = set()
        while len(seen) < 3:
            frame = await communicator.receive_from(timeout=5)
            seen |= {int(pk) for pk in re.findall(r'<tr id="task-row-(\d+)"', frame)}
        assert seen == {task.pk for task in tasks}

    # One database step for all five sockets (two if the messages straddled a flush tick), not
    # one per row or per socket; each row at most once per step. A socket that learnt of a change
    # after a step began may not reuse that step's render (fanout.py's rule), so on a loaded box a
    # row can be rendered once more in the second step: 3 renders at best, 6 at worst, never 15.
    batches = live_counts["batches"] - before["batches"]
    items = live_counts["batch_items"] - before["batch_items"]
    assert 1 <= batches <= 2
    assert 3 <= items <= 3 * batches
    # The five sockets are one room: it waits once per batch its rows are in, not once per row or
    # per socket (per-row futures and tasks were most of a loaded process's event loop, and then a
    # flush per socket: bench/fanout.py --profile), twice on its first flush (the parts for sockets
    # not in step yet, from the same batch), and builds each frame once for all five.
    waits = live_counts["batch_waits"] - before["batch_waits"]
    assert 1 <= waits <= 2 * batches
    built = live_counts["frames_built"] - before["frames_built"]
    sent = live_counts["frames_sent"] - before["frames_sent"]
    assert 1 <= built <= 2 and sent == len(sockets) * built
    for communicator in sockets:
        await communicator.disconnect()
