"""The worker's engine: polls tasks at their servers' pace, keeps listen streams open, holds leases.

Built from small async steps (Worker.refresh, Worker.poll_due, ...) that tests call one at a time;
`python manage.py worker` runs them in a loop.
"""
