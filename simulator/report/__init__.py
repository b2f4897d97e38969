"""Reports: result JSON, the HTML page, plotly charts, and progress on stderr."""
