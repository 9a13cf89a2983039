def show(items):
    for i in range(len(items) + 1):
        print(items[i])
