"""The live layer: what a page's websocket may connect from, what it is sent, and when it closes.

docs/live.md describes the whole: origin check, catch-up on connect, shared renders, the frame
cap and its "reload this section" hint, and sockets closed with the session.
"""
