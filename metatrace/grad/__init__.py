"""The grad transform: autograd rules that keep sizes symbolic and guards for what rules decide."""
