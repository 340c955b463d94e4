// Package plot draws the HTML report's figures as inline SVG: charts of
// series, heat maps, scales and colour maps. The scheme packages build
// their figures with it (Scheme.Plots); package htmlreport lays them out.
package plot
