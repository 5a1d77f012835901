"""The blame check: do coaches blame the agent whose action caused a failure (counterfactual replays)?"""
