"""Settings: safe local defaults, production settings that pass check --deploy, clear config errors."""

from pathlib import Path

from tests.support.deploy import PRODUCTION, manage


def test_check_deploy_is_clean_with_production_settings() -> None:
    run = manage("check", "--deploy", "--fail-level", "WARNING", **PRODUCTION)
    assert run.returncode == 0, run.stderr
    assert "no issues" in run.stdout


def test_a_bad_setting_fails_at_start_naming_the_variable() -> None:
    for env, word in (
        ({"DEBUG": "maybe"}, "DEBUG"),
        ({"MCP_LEASE_SECONDS": "soon"}, "MCP_LEASE_SECONDS"),
        ({"SECRET_KEY": "short"}, "SECRET_KEY"),
        ({"DATABASE_URL": "nonsense://x"}, "DATABASE_URL"),
    ):
        run = manage("check", **env)
        assert run.returncode == 2, run.stderr[-500:]
        assert run.stderr.startswith("configuration error:") and word in run.stderr
        assert "Traceback" not in run.stderr


def test_an_input_key_starting_with_a_dash_is_a_value(tmp_path: Path) -> None:
    # A database of its own: the command must not depend on the developer's var/db.sqlite3.
    database = {"DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"}
    assert manage("migrate", "--verbosity", "0", **database).returncode == 0
    answer = ("tasks", "answer", "999999", "-key-from-fastmcp:00ff", '{"action": "decline"}', "--json")
    run = manage(*answer, **database)
    assert run.returncode == 1, run.stderr
    assert "no task #999999" in run.stderr


def test_email_for_notifications_is_configured_from_the_environment() -> None:
    show = "from django.conf import settings as s; print(s.EMAIL_HOST, s.EMAIL_PORT, s.EMAIL_USE_TLS)"
    run = manage("shell", "-c", show, EMAIL_HOST="smtp.example.com", EMAIL_PORT="587", EMAIL_USE_TLS="true")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1].split() == ["smtp.example.com", "587", "True"]
    run = manage("check", EMAIL_PORT="twenty-five")
    assert run.returncode == 2 and "EMAIL_PORT" in run.stderr, run.stderr[-500:]


def test_runserver_serves_with_daphne_and_no_other_command_loads_it(tmp_path: Path) -> None:
    """Daphne's app gives `runserver` its ASGI server; every other command (the worker, migrate, the
    tests' hundreds of manage.py runs) would pay about 0.3 s of CPU importing it for nothing."""
    var = {"DASHBOARD_VAR_DIR": str(tmp_path)}
    assert "--http_timeout" in manage("runserver", "--help", **var).stdout  # Daphne's runserver
    shell = manage("shell", "-v", "0", "-c", "import sys; print('daphne.server' in sys.modules)", **var)
    assert shell.stdout.strip() == "False", shell.stderr
