def score(payload):
    print("noise")
    return {"pass": len(payload["turns"]) >= 1, "score": 0.9, "reasoning": f"{len(payload['messages'])} messages"}
