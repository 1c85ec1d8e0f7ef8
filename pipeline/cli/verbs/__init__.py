"""One module per verb of ``deploy`` (as DVC's ``dvc/commands/``): each holds ``add_parser(subparsers)``,
its flags, and ``run(args)``, its body, which imports what it needs (heavy libraries included)
inside. ``pipeline.cli`` lists the modules; a new verb is one module here and one entry there.
"""
