"""Drawings of graphs: the regions a rewrite changed, before and after (DOT, SVG via graphviz)."""
from .dot import changed_nodes, draw_regions, regions_dot, render

__all__ = ["changed_nodes", "regions_dot", "draw_regions", "render"]
