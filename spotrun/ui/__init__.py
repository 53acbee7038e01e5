"""`spotrun ui`: the local dashboard, a small web app over the service layer.

`views` turns the service layer's records into the JSON the pages read, `app` serves them
(every request carries the token; state changes also pass a same-origin check), `server`
runs it on this machine, `tensorboard` lays out run names for `tensorboard --logdir`.
The pages are hand-written HTML, JS and CSS in `static/`, shipped in the wheel.
"""
