"""Notifications: when input is needed, a task fails, or a server goes unhealthy.

`scan` turns what happened (new input requests, failed-status timeline events, servers past the
failure threshold) into rows of an outbox, one per user, channel and event, as each user chose
(`NotificationPreference`). `send` drains the outbox with retries and back-off; `drainer` runs
both on a thread of the worker process, so sending never blocks polling. docs/notifications.md.
"""
