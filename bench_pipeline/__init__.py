"""bench_pipeline: replay a team's coding tasks under several agent configurations, grade every
trial the same way, and turn the results into decisions. See README.md."""

__version__ = "0.1.0"
