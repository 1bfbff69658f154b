"""What views (HTTP) and live pages (websocket) both render from: one reading of a task, the inbox
and the overview, so that a live fragment shows what a reload would."""
