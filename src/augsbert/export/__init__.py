"""The export: a finished model copied out of its artifact (export.py), its model card (facts.py, model_card.py) and
recipe (recipe.py), the backends' registry and parity gate (backends.py) with the deploy environment's scripts
(deploy_convert.py, deploy_speed.py), a grid's frontier measured (frontier.py) and the export's pick from it
(pick.py)."""
