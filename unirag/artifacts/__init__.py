"""The artifact registry: what each workspace artifact needs, how it is built or
refreshed, and what building it will cost. It sits above the hierarchies it builds
and below the operators that read the artifacts."""
