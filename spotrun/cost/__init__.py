"""Money: billing rules, bills, shared instances, prices, budgets, reports and plots."""
