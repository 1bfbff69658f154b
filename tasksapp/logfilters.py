"""Logging filters the settings install (dashboard/settings.py LOGGING)."""

import logging


class RefusalsOnOneLine(logging.Filter):
    """django.request logs an expected refusal (a 4xx: no permission, not found, a bad request) with
    the exception's whole traceback; its one line already says all there is (status, path). Server
    errors (5xx) keep their traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and 400 <= status < 500:
            record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True
