module sunk.dev/sunk

go 1.26.0

require github.com/golang-jwt/jwt/v5 v5.3.1

require (
	github.com/apapsch/go-jsonmerge/v2 v2.0.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/oapi-codegen/runtime v1.8.0 // indirect
	github.com/prometheus/client_golang v1.22.0 // indirect
)
