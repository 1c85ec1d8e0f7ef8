from pipeline.cli import entry

raise SystemExit(entry())
