"""The web UI (`mindloop web`): watch and steer a team's work in the browser.

Owns the pages (server-rendered, a small script for the live parts), the token check,
the live feed (server-sent events from the store and the event bus, resumable) and the
driver that answers in this process what the browser starts. It decides nothing of its
own: every change goes through the use cases of `mindloop.service` and
`mindloop.taskdoc.human`, the same as the CLI's. Needs the `web` extra
(`pip install 'mindloop[web]'`).
"""
