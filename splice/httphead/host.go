package httphead

// splitHostPort validates a Host value or authority, uri-host [":" port],
// and returns the host part. An empty value is valid (RFC 9112 3.2 has
// clients send an empty Host when the target has no authority); an empty
// host with a port is not. Userinfo ("user@host") is refused.
func splitHostPort(v []byte) (host []byte, ok bool) {
	var end int
	if len(v) > 0 && v[0] == '[' {
		end = 1
		for end < len(v) && ipLiteralChar[v[end]] {
			end++
		}
		if end == 1 || end == len(v) || v[end] != ']' {
			return nil, false
		}
		end++
	} else {
		for end < len(v) && hostChar[v[end]] {
			end++
		}
	}
	host, port := v[:end], v[end:]
	if len(port) == 0 {
		return host, true
	}
	if port[0] != ':' || len(host) == 0 {
		return nil, false
	}
	for _, c := range port[1:] {
		if c < '0' || c > '9' {
			return nil, false
		}
	}
	return host, true
}

// HostMatches reports whether the request is for host name, ignoring ASCII
// case, any ":port" on name, and a trailing dot on either side
// ("example.com." is the same host as "example.com"). A request without a
// Host matches nothing.
func (r *Request) HostMatches(name string) bool {
	if r.Host == nil {
		return false
	}
	name = stripPort(name)
	host := r.Host
	if n := len(name); n > 0 && name[n-1] == '.' {
		name = name[:n-1]
	}
	if n := len(host); n > 0 && host[n-1] == '.' {
		host = host[:n-1]
	}
	if len(host) != len(name) {
		return false
	}
	for i := 0; i < len(host); i++ {
		if lower(host[i]) != lower(name[i]) {
			return false
		}
	}
	return true
}

// stripPort removes ":port" from "host:port" or "[v6]:port".
func stripPort(name string) string {
	if len(name) > 0 && name[0] == '[' {
		for i := 0; i < len(name); i++ {
			if name[i] == ']' {
				return name[:i+1]
			}
		}
		return name
	}
	for i := 0; i < len(name); i++ {
		if name[i] == ':' {
			return name[:i]
		}
	}
	return name
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
