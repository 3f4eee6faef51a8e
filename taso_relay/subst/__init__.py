"""Rules as data: the rule model, its expression language, rule files, matcher and applier."""
from .expr import ExprError
from .rule import PatternInput, PatternNode, Rule
from .rule_io import (RuleFile, RuleFileError, default_rules, load_rules, read_rule_file, rule_from_dict, rule_to_dict,
                      save_rules)

__all__ = ["ExprError", "PatternInput", "PatternNode", "Rule", "RuleFile", "RuleFileError", "default_rules",
           "load_rules", "read_rule_file", "rule_from_dict", "rule_to_dict", "save_rules"]
