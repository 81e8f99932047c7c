// topk
