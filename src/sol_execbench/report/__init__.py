"""One self-contained HTML page per dataset run (``sol-execbench report``)."""

from .page import ReportInputError, build_report

__all__ = ["ReportInputError", "build_report"]
